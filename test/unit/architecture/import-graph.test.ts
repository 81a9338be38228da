import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import ts from 'typescript';
import { packageRoot } from '../../../provider/tools/package-root.js';

/**
 * The layers of the sources, lowest first (docs/contributing.md, "Layers", says the same): a
 * file may import its own folder and the folders of lower layers, never a higher layer nor
 * another folder of its own layer. Keys are folders, or single files of provider/.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['provider/core', 'certs'],
  ['provider/model'],
  ['provider/controller'],
  ['provider/clusters', 'provider/sharding'],
  ['provider/writers'],
  ['provider/reconcilers', 'scheduler', 'webhook'],
  ['provider/kubelet'],
  ['provider/wiring'],
  ['provider/main.ts', 'provider/tools'],
  ['provider/cli.ts'],
];

const SOURCE_ROOTS = ['provider', 'scheduler', 'webhook', 'certs'];

/** One import of one file: `from` and `to` relative to the repository root, with `/`. */
interface Edge {
  from: string;
  to: string;
  specifier: string;
}

/**
 * The imports of our own modules in `files` (path -> source text): static imports and
 * re-exports, type-only ones included, and dynamic `import()` of a literal. Package imports
 * (`node:fs`, `@kubernetes/client-node`) are not edges.
 */
function importEdges(files: ReadonlyMap<string, string>): Edge[] {
  const edges: Edge[] = [];
  for (const [from, text] of files) {
    for (const { fileName: specifier } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!specifier.startsWith('.') && !specifier.startsWith('/')) continue;
      edges.push({ from, to: posix.normalize(posix.join(posix.dirname(from), specifier)), specifier });
    }
  }
  return edges;
}

/** The layer key a path belongs to (see {@link LAYERS}), or undefined. */
function layerKeyOf(path: string): string | undefined {
  const parts = path.split('/');
  if (parts[0] !== 'provider') return SOURCE_ROOTS.includes(parts[0]!) ? parts[0] : undefined;
  const key = parts.length > 2 ? `provider/${parts[1]}` : path.replace(/\.js$/, '.ts');
  return LAYERS.some((l) => l.includes(key)) ? key : undefined;
}

const rankOf = (key: string) => LAYERS.findIndex((l) => l.includes(key));

/** Each edge that breaks the layering, said as `from -> specifier: why`. */
function layerViolations(edges: readonly Edge[]): string[] {
  const out: string[] = [];
  for (const { from, to, specifier } of edges) {
    const edge = `${from} -> ${specifier}`;
    const fromKey = layerKeyOf(from);
    if (!fromKey) {
      out.push(`${edge}: ${from} is in no layer (add its folder to LAYERS and to docs/contributing.md)`);
      continue;
    }
    if (to.split('/')[0] === 'test') {
      out.push(`${edge}: a source file imports test/`);
      continue;
    }
    const toKey = layerKeyOf(to);
    if (!toKey) {
      out.push(`${edge}: ${to} is outside the layered sources`);
      continue;
    }
    if (toKey === fromKey) continue;
    const [fromRank, toRank] = [rankOf(fromKey), rankOf(toKey)];
    if (toRank > fromRank) out.push(`${edge}: ${fromKey} (layer ${fromRank}) imports ${toKey}, a higher layer (${toRank})`);
    else if (toRank === fromRank) out.push(`${edge}: ${fromKey} imports ${toKey}, another folder of its own layer (${fromRank})`);
  }
  return out;
}

function sourceFiles(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) files.set(relative(root, path).split(sep).join('/'), readFileSync(path, 'utf8'));
    }
  };
  for (const top of SOURCE_ROOTS) walk(join(root, top));
  return files;
}

describe('the import graph of the sources', () => {
  it('has no edge from a lower layer to a higher one, between folders of one layer, or into test/', () => {
    const files = sourceFiles(packageRoot());
    const edges = importEdges(files);
    // The parse found the graph: every layer's folder has files, and imports were read.
    expect(files.size).to.be.greaterThan(100);
    expect(edges.length).to.be.greaterThan(files.size);
    expect(layerViolations(edges)).to.deep.equal([]);
  });

  it('names each bad edge of a fixture graph: upward, sideways, into test/ (static, type-only and dynamic), from a folder in no layer', () => {
    const fixture = new Map([
      ['provider/model/pod.ts', "import { DelegationReconciler } from '../reconcilers/delegation.js';\nimport { KEY } from '../core/keys.js';"],
      ['provider/core/config.ts', "export const load = () => import('../../test/sandbox/sandbox.js');"],
      ['scheduler/bind.ts', "import type { ObjectCache } from '../provider/controller/object-cache.js';\nimport { markNotDelegated } from '../provider/reconcilers/proxy-writes.js';"],
      ['provider/cli.ts', "import type { Sandbox } from '../test/sandbox/sandbox.js';\nexport { runProvider } from './main.js';"],
      ['provider/elsewhere/x.ts', "import { KEY } from '../core/keys.js';"],
      ['webhook/mutate.ts', "import fs from 'node:fs';\nimport { V1Pod } from '@kubernetes/client-node';"],
    ]);
    expect(layerViolations(importEdges(fixture))).to.deep.equal([
      'provider/model/pod.ts -> ../reconcilers/delegation.js: provider/model (layer 1) imports provider/reconcilers, a higher layer (5)',
      'provider/core/config.ts -> ../../test/sandbox/sandbox.js: a source file imports test/',
      'scheduler/bind.ts -> ../provider/reconcilers/proxy-writes.js: scheduler imports provider/reconcilers, another folder of its own layer (5)',
      'provider/cli.ts -> ../test/sandbox/sandbox.js: a source file imports test/',
      'provider/elsewhere/x.ts -> ../core/keys.js: provider/elsewhere/x.ts is in no layer (add its folder to LAYERS and to docs/contributing.md)',
    ]);
  });
});
