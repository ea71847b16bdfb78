// Lints Cypher with Neo4j's own parser and semantic analysis (@neo4j-cypher/language-support).
//
// Input on stdin, JSON: {"queries": [{"name", "text", "parameters": {name: sample value}}],
//   "labels": [...], "relationshipTypes": [...], "propertyKeys": [...], "versions": ["CYPHER 5", ...]}
// Output on stdout, JSON: [{"name", "version", "diagnostics": [{"severity", "message", "line", "character"}]}]
// Procedures and functions come from the package's registry of a Neo4j 5 server (testData.mockSchema),
// so a procedure or function that Neo4j lacks (FalkorDB's db.idx.*, vecf32) is an error.
import { readFileSync } from 'node:fs';
import { lintCypherQuery, testData } from '@neo4j-cypher/language-support';

const input = JSON.parse(readFileSync(0, 'utf8'));
const registry = testData.mockSchema;

// Only the registry entries whose names occur in the queries: the analysis is then several times
// faster, and a procedure or function that Neo4j lacks is still unknown to it.
const texts = input.queries.map((q) => q.text.toLowerCase()).join('\n');
const used = (scoped) => Object.fromEntries(Object.entries(scoped).map(([version, entries]) => [
  version, Object.fromEntries(Object.entries(entries).filter(([name]) => texts.includes(name.toLowerCase()))),
]));
const procedures = used(registry.procedures);
const functions = used(registry.functions);
const out = [];
for (const version of input.versions ?? ['CYPHER 5']) {
  for (const q of input.queries) {
    const schema = {
      labels: input.labels ?? [],
      relationshipTypes: input.relationshipTypes ?? [],
      propertyKeys: input.propertyKeys ?? [],
      parameters: q.parameters ?? {},
      procedures,
      functions,
      defaultLanguage: version,
    };
    const started = Date.now();
    const { diagnostics } = lintCypherQuery(q.text, schema);
    const ms = Date.now() - started;
    out.push({
      name: q.name,
      ms,
      version,
      diagnostics: diagnostics.map((d) => ({
        severity: d.severity === 1 ? 'error' : d.severity === 2 ? 'warning' : 'info',
        message: d.message,
        line: d.range.start.line + 1,
        character: d.range.start.character + 1,
      })),
    });
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
