"""bench: see DESIGN.md."""
