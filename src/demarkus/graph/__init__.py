"""The document graph: edges observed from `rel-*` metadata and body links, persisted in
SQLite; backlinks, neighbourhoods and the explore card texts built on them."""

from .card import (
    edge_annotation,
    render_backlinks,
    render_opening,
    render_outbound,
    render_outline_section,
    render_relations,
    render_siblings,
    render_siblings_unavailable,
)
from .observe import Edge, node_url, observe_document
from .store import GraphStore, NeighborhoodPage, NeighborhoodRow, Node

__all__ = [
    "Edge",
    "GraphStore",
    "NeighborhoodPage",
    "NeighborhoodRow",
    "Node",
    "edge_annotation",
    "node_url",
    "observe_document",
    "render_backlinks",
    "render_opening",
    "render_outbound",
    "render_outline_section",
    "render_relations",
    "render_siblings",
    "render_siblings_unavailable",
]
