from django.apps import AppConfig


class McpBridgeConfig(AppConfig):
    name = "mcp_bridge"
    verbose_name = "MCP server"
