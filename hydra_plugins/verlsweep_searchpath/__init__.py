"""Where Hydra finds verlsweep's configs besides conf/ (docs/config-tree.md, "Config dirs of your own").

searchpath.py: a SearchPathPlugin, as Hydra's examples/plugins/example_searchpath_plugin, that adds to
the search path of an app whose primary config dir holds sweep.yaml (conf/, or a copy of it): the
search spaces in the top-level sweeps/ as group `space`, then the dirs in $VERLSWEEP_CONFIG_PATH.
space_source.py: the ConfigSource that shows a folder of YAML files as that one group.
"""
