/** Writes docs/flags.md from the flag table: `npm run docs:flags`. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderFlagReference } from './flag-reference.js';
import { packageRoot } from './package-root.js';

writeFileSync(join(packageRoot(), 'docs', 'flags.md'), renderFlagReference());
