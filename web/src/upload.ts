import { ApiError, getJson, session } from './api.ts';
import type { FileEntry } from './types.ts';

/** Bytes sent per request: a broken upload loses at most one chunk, and continues from the file's size. */
const CHUNK = 16 * 1024 * 1024;
const ATTEMPTS = 4;

function put(path: string, offset: number, body: Blob, onProgress: (sent: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `/api/files/upload?path=${encodeURIComponent(path)}&offset=${offset}`);
    xhr.setRequestHeader('content-type', 'application/octet-stream');
    const csrf = session.value?.csrfToken;
    if (csrf !== undefined) xhr.setRequestHeader('x-csrf-token', csrf);
    xhr.upload.onprogress = (event) => onProgress(event.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let why = `${xhr.status} ${xhr.statusText}`;
      try {
        why = (JSON.parse(xhr.responseText) as { why?: string }).why ?? why;
      } catch {
        // Not JSON: the status says enough.
      }
      reject(new ApiError(xhr.status, why));
    };
    xhr.onerror = () => reject(new Error('the connection broke'));
    xhr.send(body);
  });
}

/**
 * Uploads a file in chunks through the files API (each chunk appends at the file's current size).
 * A broken chunk is resumed from what the server has; refusals (4xx) are not retried.
 */
export async function uploadFile(
  file: File,
  path: string,
  onProgress: (sent: number) => void,
): Promise<void> {
  let offset = 0;
  let failures = 0;
  do {
    const chunk = file.slice(offset, offset + CHUNK);
    try {
      await put(path, offset, chunk, (sent) => onProgress(offset + sent));
      offset += chunk.size;
      failures = 0;
    } catch (e) {
      if ((e instanceof ApiError && e.status < 500) || ++failures >= ATTEMPTS) throw e;
      // Continue from what reached the disk.
      offset = await getJson<FileEntry>('/api/files/stat', { path })
        .then((entry) => entry.size)
        .catch(() => 0);
    }
  } while (offset < file.size);
  onProgress(file.size);
}
