"""kcoord's compiled core (Cython). Private: use the names re-exported by kcoord and kcoord.wire."""
