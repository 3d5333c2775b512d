"""The project's own NKI kernels, written only against the public NKI 0.6 API (nki, nki.language,
nki.isa, nki.collectives): what the tests run against numpy goldens, and the examples of
docs/python.md. Nothing here imports nkisim."""
import nki
import nki.isa as nisa
import nki.language as nl

P = 128    # partitions
BANK = 512  # fp32 elements of one PSUM bank


@nki.jit
def tiled_matmul(a, b):
    """c[M, N] = a[M, K] @ b[K, N] (fp32 out), as kernels/examples/tiled_matmul.cc tiles it: K in
    128-row subtiles, N in 512-column PSUM banks accumulated over K, a's tiles transposed on the
    PE array, LNC 2 splitting N into column halves."""
    m, k = a.shape
    n = b.shape[1]
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    n_shard = n // nl.num_programs()
    n_begin = nl.program_id() * n_shard
    for m0 in nl.affine_range(0, m, P):
        a_t = []
        for kt in nl.affine_range(k // P):
            a_block = nl.ndarray((P, P), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_block, src=a[m0:m0 + P, kt * P:(kt + 1) * P])
            a_psum = nl.ndarray((P, P), dtype=a.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=a_psum, data=a_block, engine=nisa.tensor_engine)
            a_t.append(nl.ndarray((P, P), dtype=a.dtype, buffer=nl.sbuf))
            nisa.tensor_copy(dst=a_t[kt], src=a_psum, engine=nisa.vector_engine)
        eviction = 0
        for n0 in nl.affine_range(n_begin, n_begin + n_shard, BANK):
            width = min(BANK, n_begin + n_shard - n0)
            acc = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.psum)
            for kt in nl.affine_range(k // P):
                b_block = nl.ndarray((P, width), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_block, src=b[kt * P:(kt + 1) * P, n0:n0 + width])
                nisa.nc_matmul(dst=acc, stationary=a_t[kt], moving=b_block, accumulate=kt > 0)
            out = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.sbuf)
            engine = nisa.vector_engine if eviction % 2 == 0 else nisa.scalar_engine
            nisa.tensor_copy(dst=out, src=acc, engine=engine)
            eviction += 1
            nisa.dma_copy(dst=c[m0:m0 + P, n0:n0 + width], src=out)
    return c


BLOCK = 4 * BANK  # B columns one careful load feeds: 4 PSUM banks, 4 KiB a partition in bf16


@nki.jit
def blocked_matmul(a, b):
    """The careful twin of tiled_matmul for the DMA engines: the same tiles on the PE and the same
    bytes moved, but a's row block in one [128, K] load (K x dtype contiguous bytes a partition),
    b in [128, 2048] blocks that feed 4 PSUM banks at once, and one [128, 2048] store a block.
    tiled_matmul's [128, 128] and [128, 512] loads leave its engines busy on descriptors."""
    m, k = a.shape
    n = b.shape[1]
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    n_shard = n // nl.num_programs()
    n_begin = nl.program_id() * n_shard
    for m0 in nl.affine_range(0, m, P):
        a_rows = nl.ndarray((P, k), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_rows, src=a[m0:m0 + P, :])
        a_t = []
        for kt in nl.affine_range(k // P):
            a_psum = nl.ndarray((P, P), dtype=a.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=a_psum, data=a_rows[:, kt * P:(kt + 1) * P],
                              engine=nisa.tensor_engine)
            a_t.append(nl.ndarray((P, P), dtype=a.dtype, buffer=nl.sbuf))
            nisa.tensor_copy(dst=a_t[kt], src=a_psum, engine=nisa.vector_engine)
        eviction = 0
        for g0 in nl.affine_range(n_begin, n_begin + n_shard, BLOCK):
            g_width = min(BLOCK, n_begin + n_shard - g0)
            widths = [min(BANK, g_width - n0) for n0 in range(0, g_width, BANK)]
            acc = [nl.ndarray((P, w), dtype=nl.float32, buffer=nl.psum) for w in widths]
            for kt in nl.affine_range(k // P):
                b_block = nl.ndarray((P, g_width), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_block, src=b[kt * P:(kt + 1) * P, g0:g0 + g_width])
                for j, w in enumerate(widths):
                    nisa.nc_matmul(dst=acc[j], stationary=a_t[kt],
                                   moving=b_block[:, j * BANK:j * BANK + w], accumulate=kt > 0)
            out = nl.ndarray((P, g_width), dtype=nl.float32, buffer=nl.sbuf)
            for j, w in enumerate(widths):
                engine = nisa.vector_engine if eviction % 2 == 0 else nisa.scalar_engine
                nisa.tensor_copy(dst=out[:, j * BANK:j * BANK + w], src=acc[j], engine=engine)
                eviction += 1
            nisa.dma_copy(dst=c[m0:m0 + P, g0:g0 + g_width], src=out)
            del acc  # the group's 4 PSUM banks are free for the next group's
    return c


@nki.jit
def matmul_auto_accumulate(lhs_t, rhs):
    """out[M, N] = lhs_t[K, M].T @ rhs[K, N] with accumulate left to the default (None): the
    first matmul into the PSUM tile overwrites, the later ones add."""
    k, m = lhs_t.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for kt in nl.sequential_range(k // P):
        l_sb = nl.load(lhs_t[nl.ds(kt * P, P), :])
        r_sb = nl.load(rhs[nl.ds(kt * P, P), :])
        nisa.nc_matmul(dst=acc, stationary=l_sb, moving=r_sb)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nl.store(out, res)
    return out


@nki.jit
def transpose(x):
    """y[C, R] = x[R, C]^T, 128 x 128 blocks through the PE array."""
    r, c = x.shape
    y = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(r // P):
        for j in nl.affine_range(c // P):
            block = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=block, src=x[i * P:(i + 1) * P, j * P:(j + 1) * P])
            t_psum = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=t_psum, data=block)
            t_sb = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=t_sb, src=t_psum)
            nisa.dma_copy(dst=y[j * P:(j + 1) * P, i * P:(i + 1) * P], src=t_sb)
    return y


@nki.jit
def softmax_isa(x):
    """Row softmax in nisa: row max, exp(x - max) with its row sum in the same activation,
    reciprocal, scale."""
    rows, cols = x.shape
    y = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, rows, P):
        t = nl.ndarray((P, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + P, :])
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        e = nl.ndarray((P, cols), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add,
                        reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        out = nl.ndarray((P, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=y[r0:r0 + P, :], src=out)
    return y


@nki.jit
def softmax_nl(x):
    """Row softmax with nl's composite (nl.load, nl.softmax, nl.store)."""
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, x.shape[0], P):
        nl.store(y[r0:r0 + P, :], nl.softmax(nl.load(x[r0:r0 + P, :]), axis=1))
    return y


@nki.jit
def rms_norm(x, w, eps):
    """y = x / sqrt(mean(x^2) + eps) * w over each row of x[N, H]; w is [1, H]."""
    n, h = x.shape
    y = nl.ndarray((n, h), dtype=x.dtype, buffer=nl.shared_hbm)
    w_sb = nl.ndarray((P, h), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w.broadcast(0, P))  # w's one row onto every partition
    for r0 in nl.affine_range(0, n, P):
        t = nl.load(x[r0:r0 + P, :], dtype=nl.float32)
        sq = nl.ndarray((P, h), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss)
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd, data=ss, op0=nl.multiply, operand0=1.0 / h, op1=nl.add,
                           operand1=eps)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=rstd)
        normed = nl.ndarray((P, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=t, op0=nl.multiply, operand0=rstd)
        out = nl.ndarray((P, h), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out, data1=normed, data2=w_sb, op=nl.multiply)
        nl.store(y[r0:r0 + P, :], out)
    return y


@nki.jit
def lnc2_gelu_rows(x):
    """y = gelu(x) * 2 with the rows split between the programs of an LNC 2 launch."""
    rows, cols = x.shape
    y = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    half = rows // nl.num_programs()
    start = nl.program_id() * half
    for r0 in nl.affine_range(start, start + half, P):
        t = nl.load(x[r0:r0 + P, :])
        nl.store(y[r0:r0 + P, :], nl.multiply(nl.gelu(t), 2.0))
    return y


@nki.jit
def lnc2_matmul_sendrecv(lhs_t, rhs):
    """out[M, N] = lhs_t[K, M].T @ rhs[K, N] with K split between the two programs: each
    accumulates its half in PSUM, the two partial sums cross with sendrecv and are added; each
    program stores half of the output rows' columns."""
    k, m = lhs_t.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id()
    k_half = k // 2
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for kt in nl.affine_range(k_half // P):
        k0 = me * k_half + kt * P
        l_sb = nl.ndarray((P, m), dtype=lhs_t.dtype, buffer=nl.sbuf)
        r_sb = nl.ndarray((P, n), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=l_sb, src=lhs_t[k0:k0 + P, :])
        nisa.dma_copy(dst=r_sb, src=rhs[k0:k0 + P, :])
        nisa.nc_matmul(dst=acc, stationary=l_sb, moving=r_sb, accumulate=kt > 0)
    mine = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=mine, src=acc)
    theirs = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    total = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=mine, data2=theirs, op=nl.add)
    cols = n // 2
    nisa.dma_copy(dst=out[:, me * cols:(me + 1) * cols], src=total[:, me * cols:(me + 1) * cols])
    nisa.core_barrier(data=out, cores=(0, 1))
    return out


def _loop_reduce(x, op, carried):
    """carried = x on the first call (a copy), carried = carried <op> x after: an accumulator
    carried across a loop's iterations."""
    if carried is None:
        carried = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=carried, src=x)
    else:
        nisa.tensor_tensor(dst=carried, data1=carried, data2=x, op=op)
    return carried


@nki.jit
def row_softmax(x):
    """y = softmax(x) over each row, in nl ops, tiled as kernels/examples/row_softmax.cc tiles it:
    the programs split the rows, each block's columns are loaded in 512-column chunks, the row max
    and the exp-sum are carried across the chunks, each chunk normalised and stored."""
    rows, cols = x.shape
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    begin = rows * nl.program_id() // nl.num_programs()
    end = rows * (nl.program_id() + 1) // nl.num_programs()
    for r0 in nl.affine_range(begin, end, P):
        r1 = min(end, r0 + P)
        parts, row_max, row_sum = [], None, None
        for c0 in nl.affine_range(0, cols, BANK):
            parts.append(nl.load(x[r0:r1, c0:min(cols, c0 + BANK)]))
            row_max = _loop_reduce(nl.max(parts[-1], axis=1, keepdims=True), nl.maximum, row_max)
        for i, part in enumerate(parts):
            parts[i] = nl.exp(nl.subtract(part, row_max, dtype=nl.float32))
            row_sum = _loop_reduce(nl.sum(parts[i], axis=1, keepdims=True), nl.add, row_sum)
        inverse_sum = nl.reciprocal(row_sum)
        for i, part in enumerate(parts):
            c0 = i * BANK
            nl.store(y[r0:r1, c0:min(cols, c0 + BANK)], nl.multiply(part, inverse_sum, dtype=y.dtype))
    return y
