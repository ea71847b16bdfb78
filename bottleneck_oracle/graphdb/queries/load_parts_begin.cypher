// name: load_parts_begin
// mode: write
// params: trace, keys
// returns: parts
// Creates the LoadPart nodes of a load that is starting, each with cursor -1 (no batch committed);
// those that exist already (a load resumed) are kept with their cursors. Written after the trace's
// old content is deleted, so a part's existence says that delete is done.
MATCH (t:Trace {id: $trace}) WHERE t.status = 'loading'
UNWIND $keys AS key
MERGE (p:LoadPart {key: key})
ON CREATE SET p.trace = $trace, p.cursor = -1
RETURN count(p) AS parts
