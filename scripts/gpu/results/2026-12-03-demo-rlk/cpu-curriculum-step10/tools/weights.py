import json,struct,array,math,sys
def load(p):
    b=open(p,'rb').read(); n=struct.unpack('<Q',b[:8])[0]; h=json.loads(b[8:8+n]); base=8+n; out={}
    for k,v in h.items():
        if k=='__metadata__': continue
        a=array.array('f'); a.frombytes(b[base+v['data_offsets'][0]:base+v['data_offsets'][1]]); out[k]=(v['shape'],a)
    return out
A=sys.argv[1]; B=sys.argv[2]
w0=load(A+'/model.safetensors'); w1=load(B+'/model.safetensors')
o0=load(A+'/optimizer.safetensors'); o1=load(B+'/optimizer.safetensors')
def nrm(a): return math.sqrt(sum(x*x for x in a))
print('tensor  ||w||  ||dw||  rel  max|dw|')
for k,(s,a) in w0.items():
    b=w1[k][1]; d=[y-x for x,y in zip(a,b)]
    print('%-45s %8.3f %8.4f %.2e %.2e'%(k,nrm(a),nrm(d),nrm(d)/nrm(a),max(abs(x) for x in d)))
E0=w0['model.embed_tokens.weight'][1]; E1=w1['model.embed_tokens.weight'][1]
v0=o0['model.embed_tokens.weight.exp_avg_sq'][1]; v1=o1['model.embed_tokens.weight.exp_avg_sq'][1]
H=128; V=1152
rows=[]
for r in range(V):
    sl=slice(r*H,(r+1)*H)
    d=[y-x for x,y in zip(E0[sl],E1[sl])]
    rows.append((r,nrm(E0[sl]),nrm(d),math.sqrt(sum(v0[sl])/H),math.sqrt(sum(v1[sl])/H)))
tok=json.load(open(A+'/tokenizer.json')); id2={i:s for s,i in tok['model']['vocab'].items()}
for a in tok['added_tokens']: id2[a['id']]=a['content']
import statistics
med=lambda i: statistics.median(r[i] for r in rows)
print('embedding rows (tied LM head): median ||row|| %.3f median ||drow|| %.2e median rms sqrt(v) before %.2e after %.2e'%(med(1),med(2),med(3),med(4)))
rk=sorted(rows,key=lambda r:-r[2])
print('largest row moves:')
for r in rk[:15]: print('  %5d %-14r ||row|| %.3f ||d|| %.2e rel %.2e rms sqrt(v) %.2e -> %.2e'%(r[0],id2.get(r[0]),r[1],r[2],r[2]/r[1],r[3],r[4]))
for t in [59,32,1065,1066,1067]+[tok['model']['vocab'].get(x,-1) for x in ['nothing','Ġfound','Ġyet','no','th']]:
    if t<0: continue
    r=rows[t]; print('  tok %5d %-14r rank %4d ||row|| %.3f ||d|| %.2e rel %.2e rms sqrt(v) %.2e -> %.2e'%(t,id2.get(t),[x[0] for x in rk].index(t),r[1],r[2],r[2]/r[1],r[3],r[4]))
# smallest v rows
rv=sorted(rows,key=lambda r:r[3])
print('rows with smallest v before:', [(r[0],id2.get(r[0]),'%.1e'%r[3],'%.1e'%r[2]) for r in rv[:8]])
