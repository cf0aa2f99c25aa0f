"""The MCP tool surface: texts, tools and the server."""
