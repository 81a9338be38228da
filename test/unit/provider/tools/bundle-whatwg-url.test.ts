import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The bundle resolves `whatwg-url` to the platform's `URL` (provider/tools/bundle.ts), which
 * holds only while node-fetch, its one importer, reads nothing else of it. A node-fetch that
 * starts using more of the package fails here, not in a cluster.
 */
describe('the bundle: whatwg-url as the platform URL', () => {
  const require = createRequire(import.meta.url);
  // client-node's own node-fetch, the copy the bundle takes.
  const clientNode = dirname(require.resolve('@kubernetes/client-node/package.json'));
  const nodeFetch = dirname(createRequire(join(clientNode, 'package.json')).resolve('node-fetch/package.json'));

  // Its CommonJS build (what esbuild takes for platform node) and its two ES module builds.
  for (const file of ['lib/index.js', 'lib/index.mjs', 'lib/index.es.js']) {
    it(`node-fetch's ${file} reads only URL of whatwg-url`, () => {
      const source = readFileSync(join(nodeFetch, file), 'utf8');
      const binding = /(?:var|const|let|import)\s+(\w+)\s*(?:=\s*_interopDefault\(require\(['"]whatwg-url['"]\)\)|from\s+['"]whatwg-url['"])/.exec(source)?.[1];
      expect(binding, 'the binding node-fetch gives whatwg-url').to.be.a('string');
      const uses = [...source.matchAll(new RegExp(`\\b${binding}\\b(\\.\\w+)?`, 'g'))].map((m) => m[1] ?? '(bare)');
      // The import itself, then `.URL` only.
      expect(uses.slice(1)).to.not.be.empty;
      expect(new Set(uses.slice(1))).to.deep.equal(new Set(['.URL']));
    });
  }
});
