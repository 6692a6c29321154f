"""kcore: see DESIGN.md."""
