"""`demarkus eval`: answer-bench runs of a frozen world through the real MCP tools.

A run loads a world into a fresh store, serves it over QUIC, gives a reader only the read
tools of a real `demarkus mcp` subprocess confined to the question's scope, and scores
every attempt against the rubric (`scoring`). Reports compare under strict rules
(`compare`).
"""
