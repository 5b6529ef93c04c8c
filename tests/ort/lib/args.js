// The command line of the test checkers: `--name value` pairs into an
// object over `defaults`; a missing required name exits 2 (a usage error,
// not a test failure).
'use strict';

function parseArgs(required, defaults = {}) {
  const a = { ...defaults };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of required)
    if (!a[k]) { console.error(`missing --${k}`); process.exit(2); }
  return a;
}

module.exports = { parseArgs };
