"""The cell: a YAML file read into frozen values (load, model, schema, waves, grammars)."""
