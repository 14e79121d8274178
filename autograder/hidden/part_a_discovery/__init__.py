"""The hidden suite of part_a_discovery.ipynb, in one section."""
