"""The `treadle` command: a thin typer app over the commands layer."""
