/**
 * Bundles the compiled command line (dist/provider/cli.js) into dist/bundle/, which
 * bin/admiralty.js runs: one chunk per command and the code they share, instead of the
 * thousand-odd modules of the compiled tree and its dependencies (client-node alone loads
 * about nine hundred). Loading the provider that way costs about half the memory and a
 * quarter of the time (README, "Performance").
 *
 * Whitespace and syntax are minified, names are not: stack traces and logged errors keep
 * the functions' names. The source maps point at dist/ (not at the sources, which are not
 * shipped). The sandbox, which the provider's sources never import, stays out of the bundle:
 * `admiralty sandbox` and `admiralty demo` load it from dist/test/ of a clone at run time
 * (provider/tools/dev-tools.ts), so the published package, which leaves dist/test/ out, holds
 * none of it.
 *
 * Run by `npm run build` after tsc, with tsx (a development dependency, like esbuild).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { build, type Plugin } from 'esbuild';
import { packageRoot } from './package-root.js';

const root = packageRoot();
const dist = join(root, 'dist');
const outdir = join(dist, 'bundle');

/**
 * node-fetch 2 (client-node's HTTP/1.1 client) imports `whatwg-url` only to fall back on its
 * `URL` where the platform has none (`Url.URL || whatwgUrl.URL`); Node has one, so the package
 * is never called. Its import alone loaded tr46's mapping table, 1.4 MiB of live heap in every
 * provider for nothing (a heap snapshot of c1's provider: the largest object of the program
 * after the bundle's own source). It resolves to the platform's `URL` instead; node-fetch reads
 * nothing else of it, which a unit test checks in node-fetch's source.
 */
const platformUrlForWhatwgUrl: Plugin = {
  name: 'platform-url-for-whatwg-url',
  setup(b) {
    b.onResolve({ filter: /^whatwg-url$/ }, () => ({ path: 'whatwg-url', namespace: 'platform-url' }));
    b.onLoad({ filter: /.*/, namespace: 'platform-url' }, () => ({ contents: 'module.exports = { URL: globalThis.URL, URLSearchParams: globalThis.URLSearchParams };', loader: 'js' }));
  },
};

rmSync(outdir, { recursive: true, force: true });
await build({
  // The admission worker is a thread's own script (see `AdmissionPool`): an entry point beside
  // the chunks, where the pool's chunk finds it.
  entryPoints: { cli: join(dist, 'provider', 'cli.js'), 'admission-worker': join(dist, 'webhook', 'admission-worker.js') },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: true,
  sourcesContent: false,
  plugins: [platformUrlForWhatwgUrl],
  // Dependencies written as CommonJS call require(); an ES module has none of its own.
  banner: { js: "import { createRequire as createRequireForBundle } from 'node:module'; const require = createRequireForBundle(import.meta.url);" },
  logLevel: 'warning',
});
