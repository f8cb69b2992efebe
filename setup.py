"""The project is described in pyproject.toml; this shim lets older tools call ``setup.py``."""
from setuptools import setup

setup()
