"""Evaluations of memory-assets against public benchmarks."""
