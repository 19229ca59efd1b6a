// What every Node client script shares: packages from the client environment
// ($HERMES_CLIENTS_DIR/node/node_modules), the config from argv, JSON lines.
import { createRequire } from 'node:module';
import path from 'node:path';

const nodeDir = path.join(process.env.HERMES_CLIENTS_DIR || '/work/clients', 'node');
// ESM resolution ignores NODE_PATH; resolve from the environment's own directory.
export const require = createRequire(path.join(nodeDir, 'package.json'));

const t0 = performance.now();
export const now = () => (performance.now() - t0) / 1000;

export function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, t: Number(now().toFixed(4)), ...fields }) + '\n');
}

export function version(name) {
  // Not require(`${name}/package.json`): some packages do not export it.
  const fs = require('node:fs');
  return JSON.parse(fs.readFileSync(path.join(nodeDir, 'node_modules', name, 'package.json'), 'utf8')).version;
}

function describe(err) {
  const chain = [];
  let e = err;
  while (e && chain.length < 4) {
    chain.push(`${e.name || typeof e}: ${e.message || String(e)}`);
    e = e.cause;
  }
  return {
    type: err?.name || typeof err,
    message: String(err?.message || err).slice(0, 2000),
    chain,
    status: err?.statusCode ?? err?.status ?? null,
    body: err?.responseBody ?? null,
  };
}
export { describe };

export async function main(cases) {
  const [name, raw] = process.argv.slice(2);
  if (!cases[name] || !raw) {
    process.stderr.write(`usage: ${process.argv[1]} {${Object.keys(cases).join('|')}} CONFIG_JSON\n`);
    process.exit(2);
  }
  try {
    await cases[name](JSON.parse(raw));
  } catch (err) {
    emit('exception', describe(err));
    process.stderr.write(`${err?.stack || err}\n`);
    process.exit(1);
  }
  emit('done');
  process.exit(0);
}
