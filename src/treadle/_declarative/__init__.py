"""Declarative workflows: definitions in YAML or JSON, loaded into ordinary ``Workflow`` objects.

A floor of its own above ``_agents``: a definition may name agents, which
become ``AgentExecutor`` steps. PyYAML and cel-python (the ``declarative``
extra) are imported by the modules here, which ``import treadle`` never loads.
"""
