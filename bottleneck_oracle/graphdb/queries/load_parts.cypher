// name: load_parts
// mode: read
// guard: none
// params: trace
// returns: key, cursor
// The parts of a trace's load under way and the last batch each has committed.
MATCH (p:LoadPart {trace: $trace})
RETURN p.key AS key, p.cursor AS cursor
ORDER BY key
