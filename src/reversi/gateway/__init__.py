"""reversi-gateway: an MCP proxy between an agent and its upstream MCP servers that journals every call.

`main.py` parses the flags and serves; `proxy.py` is the agent's side (journal, then forward);
`operator.py` the operator tools; `upstream.py` keeps the upstreams connected; `http.py` serves
both over streamable HTTP with keys; `results.py` is where results and errors meet MCP.
"""
