"""What the network faces share: Host/Origin guards, the MCP HTTP transport, typed MCP outputs."""
