"""transport: see DESIGN.md."""
