// The UI's Markdown renderer and <shell> splitter (web/js/markdown.js), in node: no
// browser needed. Safety first: no raw HTML, no unsafe link scheme ever gets through.

import { renderMarkdown, splitShell } from '../../web/js/markdown.js';

let failures = 0;
function check(name, actual, expected) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) {
    failures++;
    console.error(`FAILED ${name}\n  expected: ${e}\n  actual:   ${a}`);
  }
}

// Safety.
check('html is escaped', renderMarkdown('<script>alert(1)</script>'), '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
check('img tag is escaped', renderMarkdown('<img src=x onerror=alert(1)>'), '<p>&lt;img src=x onerror=alert(1)&gt;</p>');
for (const href of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'java\tscript:alert(1)', 'data:text/html,x', 'vbscript:x', 'file:///etc/passwd']) {
  const html = renderMarkdown(`[x](${href})`);
  check(`no link for ${href}`, html.includes('<a'), false);
}
check('quotes cannot break out of an attribute',
  renderMarkdown('[x](https://a.com/"onmouseover="alert(1))'),
  '<p><a href="https://a.com/&quot;onmouseover=&quot;alert(1" target="_blank" rel="noopener noreferrer">x</a>)</p>');
check('safe link', renderMarkdown('[docs](https://a.com/?a=1&b=2)'),
  '<p><a href="https://a.com/?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">docs</a></p>');
check('code is verbatim', renderMarkdown('`<b>**x**</b>`'), '<p><code>&lt;b&gt;**x**&lt;/b&gt;</code></p>');
check('fenced code is escaped', renderMarkdown('```\n<b>\n```'), '<div class="code-block"><pre><code>&lt;b&gt;</code></pre></div>');

// Blocks and inline.
check('heading', renderMarkdown('## Hi *there*'), '<h2>Hi <em>there</em></h2>');
check('emphasis', renderMarkdown('**b** *i* _j_ ~~d~~ snake_case_name'),
  '<p><strong>b</strong> <em>i</em> <em>j</em> <del>d</del> snake_case_name</p>');
check('tight nested list', renderMarkdown('- a\n- b\n  - c\n- d'), '<ul><li>a</li><li>b<ul><li>c</li></ul></li><li>d</li></ul>');
check('ordered list start', renderMarkdown('3. x\n4. y'), '<ol start="3"><li>x</li><li>y</li></ol>');
check('list then ordered list', renderMarkdown('- a\n\n1. b'), '<ul><li>a</li></ul><ol><li>b</li></ol>');
check('bare url', renderMarkdown('see https://a.com/x_y.'),
  '<p>see <a href="https://a.com/x_y" target="_blank" rel="noopener noreferrer">https://a.com/x_y</a>.</p>');
check('table', renderMarkdown('| a | b |\n|--:|---|\n| 1 | 2 |'),
  '<div class="table-wrap"><table><thead><tr><th class="align-right">a</th><th>b</th></tr></thead><tbody><tr><td class="align-right">1</td><td>2</td></tr></tbody></table></div>');
check('blockquote and rule', renderMarkdown('> q\n\n---'), '<blockquote><p>q</p></blockquote><hr>');

// <shell> segments: the text is split, never changed.
const reply = 'Look:\n<shell>ls -la</shell> <shell>cat "a b"</shell>\nDone <shell>echo';
const segments = splitShell(reply);
const sh = (command, closed, attributes = {}, tag = 'shell') => ({ type: 'shell', tag, attributes, command, closed });
check('segments', segments, [
  { type: 'text', text: 'Look:\n' },
  sh('ls -la', true),
  { type: 'text', text: ' ' },
  sh('cat "a b"', true),
  { type: 'text', text: '\nDone ' },
  sh('echo', false),
]);
// Attributes and the process tags (docs/agents.md).
check('process tags', splitShell('<shell background port=8000>srv</shell>\n<process-output id="p1"/><process-input id=\'p1\' key="enter"/><process-kill>p1</process-kill><shell a="x"b>no</shell>'), [
  sh('srv', true, { background: '', port: '8000' }),
  { type: 'text', text: '\n' },
  sh('', true, { id: 'p1' }, 'process-output'),
  sh('', true, { id: 'p1', key: 'enter' }, 'process-input'),
  sh('p1', true, {}, 'process-kill'),
  { type: 'text', text: '<shell a="x"b>no</shell>' },
]);
check('a partial opener with attributes is held back', splitShell('run <shell background rea', { streaming: true }), [{ type: 'text', text: 'run ' }]);
check('a comparison is not held back', splitShell('if a <b then', { streaming: true }), [{ type: 'text', text: 'if a <b then' }]);
check('a partial opener is held back while streaming', splitShell('run <she', { streaming: true }), [{ type: 'text', text: 'run ' }]);
check('but shown when complete', splitShell('run <she'), [{ type: 'text', text: 'run <she' }]);

if (failures) {
  console.error(`${failures} markdown check(s) failed`);
  process.exit(1);
}
console.log('ok: markdown');
