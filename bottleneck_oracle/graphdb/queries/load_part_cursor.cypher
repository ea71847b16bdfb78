// name: load_part_cursor
// mode: read
// guard: none
// params: part
// returns: cursor
// The last batch one part of a load under way has committed (nothing: the part is not begun).
MATCH (p:LoadPart {key: $part})
RETURN p.cursor AS cursor
