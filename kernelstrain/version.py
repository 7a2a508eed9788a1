"""The package version, in a module of its own: every module may name it without importing the
package's face (kernelstrain/__init__.py, which sits above them all)."""
__version__ = "0.1.0"
