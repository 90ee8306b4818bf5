"""Drawing: styles, colours, curves, the display list, and the builders that turn tracks into it."""
