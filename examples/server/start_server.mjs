// Starts smol-server on a free port for a node test and waits until /health says the model is
// loaded. The server is stopped with SIGTERM when the test's process exits, even after a throw.
//   const { url, server } = await startServer(BINARY, ['-m', MODEL, ...]);
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
