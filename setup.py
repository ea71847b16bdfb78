"""Builds the small C core of the DAG layer; everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("bottleneck_oracle.graph._native", ["bottleneck_oracle/graph/_native.c"],
                             extra_compile_args=["-O2"])])
