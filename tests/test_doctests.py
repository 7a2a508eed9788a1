"""Every docstring example in the kernelstrain package runs and prints what it shows."""
import doctest
import importlib
import pkgutil

import pytest

import kernelstrain

MODULES = sorted(m.name for m in pkgutil.walk_packages(kernelstrain.__path__, "kernelstrain.")
                 if m.name != "kernelstrain.__main__")


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctest examples failed"
