// name: playbook_version
// mode: read
// guard: none
// params:
// returns: version, entries
// Which version (content hash) of the playbook is loaded, and how many entries it has.
MATCH (p:Playbook)
RETURN p.version AS version, count(p) AS entries
ORDER BY entries DESC
