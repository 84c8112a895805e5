#!/usr/bin/env python3
"""Where a store's bytes go: envelope, part heads, piece names, NVIDIA framing, record data."""
import os, sys, struct, hashlib, collections
try:
    import zstandard
except ImportError:
    import glob, zipfile
    tag = 'cp%d%d' % sys.version_info[:2]
    for w in glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'whl', f'*-{tag}-*.whl')):
        zipfile.ZipFile(w).extractall('/tmp/zs')
        sys.path.insert(0, '/tmp/zs')
    try:
        import zstandard
    except ImportError:
        zstandard = None

root = sys.argv[1]
tot = collections.Counter()
recs = collections.Counter()   # record data hash -> count across entries
rec_len = {}
nrec_hist = collections.Counter()
piece_cache = {}

def piece_bytes(d, name, l):
    p = os.path.join(d, 'pieces', name.hex())
    if not os.path.exists(p):
        # maybe different naming
        cands = [f for f in os.listdir(os.path.join(d, 'pieces')) if f.startswith(name.hex())]
        if not cands: return None
        p = os.path.join(d, 'pieces', cands[0])
    b = open(p, 'rb').read()
    if len(b) == l: return b
    if b[:8] == b'PKZPIECE' and zstandard:
        return zstandard.ZstdDecompressor().decompress(b[16:], max_output_size=l)
    return None

for dp, dirs, files in os.walk(root):
    if not dp.split('/')[-2:-1] == ['host-pipelines'] and 'host-pipelines' not in dp.split('/')[-2:-1]:
        pass
    for f in files:
        p = os.path.join(dp, f)
        sz = os.path.getsize(p)
        if f.endswith('.entry'):
            tot['entry_files'] += 1
            tot['entry_bytes'] += sz
            b = open(p, 'rb').read()
            tot['envelope'] += 120
            n = struct.unpack_from('<Q', b, 80)[0]
            body = b[120:]
            fmt = struct.unpack_from('<I', b, 8)[0]
            kind = struct.unpack_from('<I', b, 28)[0]
            if fmt == 1:
                payload = body; tot['fmt1'] += 1
            else:
                plen, c = struct.unpack_from('<QI', body, 0)
                tot['body_head'] += 16
                off = 16; payload = b''
                for i in range(c):
                    pk, s, l = struct.unpack_from('<IIQ', body, off)
                    tot['part_heads'] += 16; off += 16
                    if pk == 0:
                        payload += body[off:off+l]; tot['inline_bytes'] += l; off += l
                    elif pk == 3:
                        tot['packed_stored'] += s; tot['packed_len'] += l
                        if zstandard:
                            payload += zstandard.ZstdDecompressor().decompress(body[off:off+s], max_output_size=l)
                        off += s
                    else:
                        name = body[off:off+32]; off += 32
                        tot['piece_names'] += 32; tot['piece_refs_len'] += l
                        pb = piece_bytes(dp, name, l)
                        if pb is None: tot['piece_unreadable'] += 1; payload = None; break
                        if pk == 2:
                            m = struct.unpack_from('<I', pb, 0)[0]
                            acc = b''
                            for j in range(m):
                                nm = pb[8+40*j:8+40*j+32]; ll = struct.unpack_from('<Q', pb, 8+40*j+32)[0]
                                acc += piece_bytes(dp, nm, ll) or b''
                            pb = acc
                        if payload is not None: payload += pb
            if payload is None or kind != 0: continue
            # NVIDIA framing
            hl = struct.unpack_from('<I', payload, 0)[0]
            cnt = struct.unpack_from('<I', payload, hl)[0]
            tot['vk_header'] += hl + 4
            o = hl + 4
            nrec_hist[cnt] += 1
            for r in range(cnt):
                if o + 60 > len(payload): tot['bad_frame'] += 1; break
                key = payload[o:o+16]; dn = struct.unpack_from('<I', payload, o+16)[0]
                tot['rec_heads'] += 60; tot['rec_data'] += dn
                h = hashlib.blake2b(payload[o:o+60+dn], digest_size=16).digest()
                recs[h] += 1; rec_len[h] = 60 + dn
                if payload[o+8:o+16] == b'_NVDICT_': tot['dict_records'] += 1; tot['dict_bytes'] += dn
                o += 60 + dn
            if o != len(payload): tot['trailing'] += len(payload) - o
        elif 'pieces' in dp.split('/')[-1:]:
            tot['piece_files'] += 1; tot['piece_bytes'] += sz
        else:
            tot['other:' + (f.rsplit('.', 1)[-1] if '.' in f else f)] += sz

uniq = sum(rec_len[h] for h in recs)
allr = sum(rec_len[h] * c for h, c in recs.items())
tot['records_unique_bytes'] = uniq
tot['records_all_bytes'] = allr
tot['records_unique'] = len(recs)
tot['records_shared_kinds'] = sum(1 for c in recs.values() if c > 1)
for k in sorted(tot): print(f'{k:24} {tot[k]:>12,}')
print('records per entry', dict(sorted(nrec_hist.items())))
