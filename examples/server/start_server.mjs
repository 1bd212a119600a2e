// What the node tests share: starting smol-server on a free port (waiting until /health says the
// model is loaded; SIGTERM when the test's process exits, even after a throw), their `--name
// value` arguments, and their ok/FAIL lines with the exit status they give.
//   const { url, server } = await startServer(BINARY, ['-m', MODEL, ...]);
//   const args = testArgs(); check(condition, 'what'); ... finish();
// The official-client tests start it one way: startTestServer(args) with testKey.
import { spawn } from 'node:child_process';

export async function startServer(binary, args) {
  const server = spawn(binary, [...args, '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  process.on('exit', () => server.kill('SIGTERM'));
  let log = '';
  // It prints the address it listens on.
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 30000);
    server.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on (http:\/\/[^\s]+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    server.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
  for (let i = 0; i < 300; i++) {
    const r = await fetch(`${url}/health`).catch(() => null);
    if (r?.status === 200) break;
    await new Promise((r2) => setTimeout(r2, 100));
  }
  return { url, server };
}

// The key and the server the official-client tests run against: the tiny model (--model), a
// 2048-token context, two slots, an API key and the alias 'smol-tiny' that replies name.
export const testKey = 'test-key';
export function startTestServer(args) {
  return startServer(args.server, ['-m', args.model, '-c', '2048', '--parallel', '2', '--api-key', testKey,
                                   '--alias', 'smol-tiny']);
}

// The test's command line, `--name value` pairs, as an object.
export function testArgs() {
  return Object.fromEntries(
    process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
}

let passes = 0;
let failures = 0;
// One check: an ok or FAIL line; a failure sets process.exitCode, which a test may look at to
// print what helps explain it.
export function check(condition, what) {
  if (condition) { passes++; console.log(`ok   ${what}`); } else { failures++; process.exitCode = 1; console.log(`FAIL ${what}`); }
}
// The totals, and the process's exit status: 1 when any check failed.
export function finish() {
  console.log(`${passes} passed, ${failures} failed`);
  process.exit(failures === 0 ? 0 : 1);
}
