// Showing MCP content readably: a resource's contents (text, or a blob by its type and size) and a
// prompt message's content blocks (text, image, audio, embedded resource, resource link). Text is
// put in the page as text; binary data is never rendered, only described and offered as a download.

import { el } from './util.js';

/// `text` as nodes that may break only after `_`, `-`, `.`, `/` or `:` (a `<wbr>` there), for
/// names and URIs in cells that must not break inside a word.
export function breakable(text) {
  const nodes = [];
  for (const piece of String(text ?? '').split(/(?<=[_\-./:])/)) {
    if (nodes.length > 0) nodes.push(el('wbr'));
    nodes.push(piece);
  }
  return nodes;
}

/// Bytes that `base64` decodes to.
export function base64Bytes(base64) {
  const text = String(base64 || '').replace(/\s+/g, '');
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((text.length * 3) / 4) - padding);
}

/// "1.2 KB", "312 bytes".
export function size(bytes) {
  if (bytes < 1024) return `${bytes} byte${bytes === 1 ? '' : 's'}`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/// A button that saves base64 `data` as a file of type `mime`.
function download(data, mime, name) {
  const button = el('button', { type: 'button', class: 'quiet', 'data-action': 'download' }, 'Download');
  button.addEventListener('click', () => {
    let bytes;
    try {
      const binary = atob(String(data || '').replace(/\s+/g, ''));
      bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    } catch {
      button.textContent = 'Not valid base64';
      button.disabled = true;
      return;
    }
    const url = URL.createObjectURL(new Blob([bytes], { type: mime || 'application/octet-stream' }));
    const link = el('a', { href: url, download: name || 'download' });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  });
  return button;
}

function fileName(uri) {
  const last = String(uri || '').split(/[/?#]/).filter(Boolean).pop();
  return last || 'resource';
}

/// One item of a resource's `contents`: its URI and type, then its text or its blob's size.
export function resourceContent(item) {
  const mime = item.mimeType || 'no type given';
  if (typeof item.text === 'string') {
    return el('div', { class: 'content-item', 'data-kind': 'text' },
      el('div', { class: 'meta' }, `${item.uri || ''} · ${mime} · ${size(new TextEncoder().encode(item.text).length)}`),
      el('pre', { 'data-testid': 'resource-text' }, item.text));
  }
  if (typeof item.blob === 'string') {
    return el('div', { class: 'content-item', 'data-kind': 'blob' },
      el('div', { class: 'meta' }, `${item.uri || ''} · ${mime}`),
      el('p', { 'data-field': 'blob' }, `Binary content: ${mime}, ${size(base64Bytes(item.blob))} `, download(item.blob, item.mimeType, fileName(item.uri))));
  }
  return el('div', { class: 'content-item' }, el('pre', {}, JSON.stringify(item, null, 2)));
}

/// One content block of a prompt message.
export function contentBlock(block) {
  if (!block || typeof block !== 'object') return el('pre', {}, JSON.stringify(block));
  switch (block.type) {
    case 'text':
      return el('pre', { 'data-field': 'text' }, String(block.text ?? ''));
    case 'image':
    case 'audio':
      return el('p', { 'data-field': block.type },
        `${block.type === 'image' ? 'Image' : 'Audio'}: ${block.mimeType || 'no type given'}, ${size(base64Bytes(block.data))} `,
        download(block.data, block.mimeType, block.type));
    case 'resource':
      return resourceContent(block.resource || {});
    case 'resource_link':
      return el('p', { 'data-field': 'link' }, 'Resource link: ', el('code', {}, String(block.uri || '')),
        block.name ? ` (${block.name})` : '');
    default:
      return el('pre', {}, JSON.stringify(block, null, 2));
  }
}
