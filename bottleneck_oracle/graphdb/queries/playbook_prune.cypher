// name: playbook_prune
// mode: write
// params: version
// returns: deleted
// Deletes playbook entries of other versions (entries renamed or removed since).
MATCH (p:Playbook)
WHERE p.version <> $version
DETACH DELETE p
RETURN count(*) AS deleted
