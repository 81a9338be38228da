import { expect } from 'chai';
import { checkXmlWellFormed } from '../../support/xml-well-formed.js';

describe('checkXmlWellFormed', () => {
  it('accepts well-formed documents and returns the root', () => {
    expect(checkXmlWellFormed('<?xml version="1.0"?>\n<svg a="1"><g><rect x="0"/></g><text>a &amp; b &#60;</text></svg>\n')).to.equal('svg');
    expect(checkXmlWellFormed("<a b='x'/>")).to.equal('a');
  });

  const bad: [string, string, RegExp][] = [
    ['unclosed', '<svg><g></svg>', /<\/svg> closes <g>/],
    ['never closed', '<svg><g>', /<g> is never closed/],
    ['two roots', '<a/><b/>', /second root/],
    ['text outside', 'x<a/>', /text outside/],
    ['raw ampersand', '<a>fish & chips</a>', /bad entity/],
    ['raw < in text', '<a>1 < 2</a>', /malformed tag/],
    ['unquoted attribute', '<a b=1/>', /malformed tag/],
    ['ampersand in attribute', '<a b="x & y"/>', /bad entity/],
    ['empty', '', /no root/],
  ];
  for (const [name, text, message] of bad) {
    it(`refuses: ${name}`, () => {
      expect(() => checkXmlWellFormed(text)).to.throw(message);
    });
  }
});
