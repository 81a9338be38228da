import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { FLAGS } from '../../../provider/core/config.js';
import { renderFlagReference } from '../../../provider/tools/flag-reference.js';

describe('docs/flags.md', () => {
  const page = readFileSync(new URL('../../../docs/flags.md', import.meta.url), 'utf8');

  it('is exactly what the flag table renders (run `npm run docs:flags` after changing a flag)', () => {
    expect(page).to.equal(renderFlagReference());
  });

  it('has one row per flag of the table, with its default', () => {
    for (const f of Object.values(FLAGS)) {
      const row = page.split('\n').find((l) => l.startsWith(`| \`--${f.flag}\` |`));
      expect(row, f.flag).to.be.a('string');
      if (f.default) expect(row).to.contain(`\`${f.default}\``);
    }
  });
});
