"""`python -m memory_assets.cli`: the same command line as the `memory-assets` script."""

from memory_assets.cli import main

main()
