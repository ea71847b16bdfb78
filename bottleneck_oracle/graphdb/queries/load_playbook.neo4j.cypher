// name: load_playbook
// mode: write
// params: version, key, category, title, signal, remedy, effect, text, embedding
// returns: created
// Creates or updates the playbook entries (columns of equal length) with their embeddings as
// lists of floats, which Neo4j's vector index reads.
UNWIND range(0, size($key) - 1) AS i
MERGE (p:Playbook {key: $key[i]})
SET p.category = $category[i], p.title = $title[i], p.signal = $signal[i], p.remedy = $remedy[i],
    p.effect = $effect[i], p.text = $text[i], p.version = $version, p.embedding = $embedding[i]
RETURN count(*) AS created
