"""KernelStrain: synthetic long-horizon GPU kernel-optimization trajectories."""
__version__ = "0.1.0"
