// The raw JSON view of a result (a tool tried, a resource read, a prompt got): a closed "Raw JSON"
// disclosure holding exactly what the daemon answered, pretty-printed, for when the readable view
// leaves something out.

import { el } from './util.js';

/// A `<details>` showing `value` as indented JSON; `testid` names it for the tests.
export function rawJson(value, testid = 'raw-json') {
  return el('details', { class: 'raw', 'data-testid': testid },
    el('summary', {}, 'Raw JSON'),
    el('pre', { 'data-field': 'raw' }, JSON.stringify(value, null, 2)));
}
