import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

/**
 * The web interface: built into web/dist, which `ucompute serve` serves at `/`. In development
 * (`npx vite web`), API calls go to a running `ucompute serve` (UCOMPUTE_URL, default :7080).
 */
const target = process.env.UCOMPUTE_URL ?? 'http://127.0.0.1:7080';

export default defineConfig({
  root: import.meta.dirname,
  plugins: [preact()],
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 400 },
  server: {
    proxy: {
      '/api': { target, ws: true, changeOrigin: false },
      '/auth': { target },
      '/sessions': { target },
    },
  },
});
