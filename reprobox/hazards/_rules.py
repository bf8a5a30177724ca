"""What each hazard is and how to fix it (`RULES`), and the finding that reports one in the job's code."""

from __future__ import annotations

from dataclasses import dataclass

WARNING = "warning"
INFO = "info"


@dataclass(frozen=True)
class Finding:
    """One hazard at one place in the job's code."""

    path: str  # relative posix path within the code dir
    line: int  # 1-based
    column: int  # 1-based, as editors and linters print it
    rule: str
    message: str
    fix: str
    severity: str = WARNING  # "warning", or "info" for code that is only a risk in some set-ups

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
        }

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.rule}: {self.message}"


@dataclass(frozen=True)
class Rule:
    """What a hazard is and how to fix it; `{detail}` in the message is filled per finding."""

    id: str
    message: str
    fix: str
    severity: str = WARNING


_KEEP_DETERMINISTIC_ON = (
    "Keep torch.use_deterministic_algorithms(True) on (reprobox turns it on before your code runs), "
)

# Hazards the guest already neutralises when the job runs under reprobox; still hazards anywhere else.
COVERED_BY_REPROBOX: dict[str, str] = {
    "set-iteration-order": "reprobox fixes PYTHONHASHSEED, so the order repeats under reprobox "
    "on the same Python",
    "dataloader-unseeded-workers": "reprobox seeds torch's global RNG before the job starts, so the "
    "shuffle order and the worker seeds repeat under reprobox",
    "dataloader-unchecked": "reprobox seeds torch's global RNG before the job starts, so the shuffle "
    "order and the worker seeds repeat under reprobox",
    "random-split-unseeded": "reprobox seeds torch's global RNG before the job starts, so the split "
    "repeats under reprobox as long as nothing before it draws a different count of random numbers",
    "unseeded-generator": "reprobox gives every generator created without a seed one derived from the "
    "job seed (unless determinism.seed_unseeded_generators is false), so it repeats under reprobox",
    "sklearn-random-state": "reprobox seeds NumPy's global RNG before the job starts, so it repeats under "
    "reprobox as long as nothing before it draws a different count of random numbers",
}

RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule(
            "index-add",
            "index_add on a CUDA tensor accumulates with atomicAdd, so repeated indices are summed in no "
            "fixed order and floating-point results differ between runs.",
            _KEEP_DETERMINISTIC_ON + "which switches index_add to a deterministic kernel, and do not "
            "turn it off around this call.",
        ),
        Rule(
            "scatter-add",
            "scatter_add/scatter_reduce on a CUDA tensor accumulate with atomic operations, so repeated "
            "indices are combined in no fixed order.",
            _KEEP_DETERMINISTIC_ON + "which makes scatter_add_ and scatter_reduce with reduce='sum' or "
            "'mean' deterministic on CUDA, and avoid reduce='prod' on CUDA, which has no deterministic "
            "implementation.",
        ),
        Rule(
            "index-put-accumulate",
            "index_put with accumulate=True sums into repeated indices in no fixed order unless "
            "deterministic algorithms are on.",
            _KEEP_DETERMINISTIC_ON + "which makes index_put(accumulate=True) deterministic, or remove "
            "duplicate indices before the call.",
        ),
        Rule(
            "put",
            "Tensor.put_ has no deterministic implementation with accumulate=False on any device, nor "
            "with accumulate=True on CUDA.",
            "Write through indexing instead (x.view(-1)[index] = source, or "
            "x.view(-1).index_put_((index,), source, accumulate=True) to add), which is deterministic "
            "under torch.use_deterministic_algorithms(True).",
        ),
        Rule(
            "bincount",
            "bincount with weights= on a CUDA tensor adds the weights atomically in no fixed order and "
            "has no deterministic implementation.",
            "Compute the weighted counts on CPU (x.cpu().bincount(w.cpu())) or as a one-hot product "
            "(F.one_hot(x, n).to(w.dtype).T @ w) in verified runs.",
        ),
        Rule(
            "histc",
            "torch.histc on a CUDA tensor with floating-point input has no deterministic implementation.",
            "Compute the histogram on CPU (torch.histc(x.cpu(), ...)) in verified runs.",
        ),
        Rule(
            "embedding-bag",
            "EmbeddingBag may produce nondeterministic gradients on CUDA, and with mode='max' its CUDA "
            "backward has no deterministic implementation at all.",
            "Avoid mode='max' on CUDA (it throws under torch.use_deterministic_algorithms(True)); with "
            "mode='sum' or 'mean' keep deterministic algorithms on and check the job with reprobox verify.",
        ),
        Rule(
            "ctc-loss",
            "CTC loss has no deterministic backward on CUDA (and cuDNN may pick a nondeterministic "
            "algorithm), so its gradients differ between runs.",
            "Compute the loss on CPU in verified runs (F.ctc_loss(log_probs.cpu(), ...)), where its "
            "backward is deterministic.",
        ),
        Rule(
            "interpolate",
            "{detail} has a CUDA backward that adds gradients atomically in no fixed order and throws "
            "under torch.use_deterministic_algorithms(True); the forward pass is deterministic.",
            "If nearest-neighbour upsampling by an integer factor s suits the model, use "
            "F.interpolate(x, scale_factor=s, mode='nearest') or "
            "x.repeat_interleave(s, -1).repeat_interleave(s, -2), whose backward is deterministic.",
        ),
        Rule(
            "max-unpool",
            "MaxUnpool has no deterministic implementation on any device: with repeated indices the "
            "value that lands last wins.",
            "Rebuild the unpooled tensor with scatter_ on flattened views, e.g. x.new_zeros(n, c, h * w)"
            ".scatter_(2, indices.flatten(2), pooled.flatten(2)).view(n, c, h, w), which is "
            "deterministic under torch.use_deterministic_algorithms(True).",
        ),
        Rule(
            "grid-sample",
            "grid_sample's backward on CUDA adds gradients atomically in no fixed order and has no "
            "deterministic implementation.",
            "Run the grid_sample backward on CPU in verified runs, or accept small gradient "
            "differences and compare with a tolerance.",
        ),
        Rule(
            "uninitialized-empty",
            "{detail}, so its values are whatever was in memory (NaN when deterministic algorithms "
            "fill uninitialized memory).",
            "Allocate with torch.zeros/torch.full, or fill the tensor (.zero_(), .fill_(), .copy_(), "
            "out=) before reading it.",
        ),
        Rule(
            "dataloader-unseeded-workers",
            "DataLoader with {detail}: worker seeds and the shuffle order come from the global torch "
            "RNG, so they change whenever anything draws random numbers before the loader runs.",
            "Pass generator=g, a torch.Generator seeded once with g.manual_seed(seed), and "
            "worker_init_fn=seed_worker, which seeds numpy and random from torch.initial_seed() % 2**32, "
            "as PyTorch's reproducibility notes show (reprobox.generator() and reprobox.seed_worker are "
            "both ready-made).",
        ),
        Rule(
            "dataloader-unchecked",
            "DataLoader options come from {detail}, so the audit could not check whether worker "
            "processes get a seeded generator= and worker_init_fn=.",
            "If these options can set num_workers above 0, have them include generator=g (a "
            "torch.Generator seeded once) and worker_init_fn=seed_worker (reprobox.generator() and "
            "reprobox.seed_worker are ready-made); passing those two by name lets the audit check them.",
            INFO,
        ),
        Rule(
            "random-split-unseeded",
            "random_split {detail} draws the split from the global torch RNG, so which samples land in "
            "which subset changes whenever anything draws random numbers before it.",
            "Pass generator=torch.Generator().manual_seed(seed) (reprobox.generator() is ready-made) so "
            "the split depends on its own seed alone.",
        ),
        Rule(
            "unseeded-generator",
            "{detail}, so the numbers drawn from it differ on every run.",
            "Pass an explicit seed from the job's configuration (np.random.default_rng(seed), "
            "random.Random(seed), g.manual_seed(seed) instead of g.seed() or torch.seed()).",
        ),
        Rule(
            "seed-from-clock",
            "The seed is derived from the clock ({detail}), so it changes on every run.",
            "Use a fixed seed from the job's configuration (reprobox seeds random, numpy and torch "
            "before your code runs) and record it.",
        ),
        Rule(
            "seed-from-entropy",
            "The seed comes from a source that differs on every run ({detail}).",
            "Use a fixed seed from the job's configuration (reprobox seeds random, numpy and torch "
            "before your code runs), or pass an explicit seed to the generator.",
        ),
        Rule(
            "set-iteration-order",
            "Iterating a set fixes an order that follows string hashing, which changes with "
            "PYTHONHASHSEED and the Python version, so indices or sequences built from it are not "
            "stable.",
            "Iterate the set in sorted order instead, for example enumerate(sorted(set(words))).",
        ),
        Rule(
            "tokenizer-training",
            "{detail}, so the vocabulary's ids, and sometimes its tokens, differ from run to run.",
            "No seed or setting makes this trainer repeat (PYTHONHASHSEED and TOKENIZERS_PARALLELISM do "
            "not reach the Rust hash map; huggingface/tokenizers#1794): train the vocabulary once, keep the "
            "saved file with the job's data and load it in verified runs (Tokenizer.from_file(...), "
            "BertWordPieceTokenizer('vocab.txt')); WordLevelTrainer, and BpeTrainer without "
            "continuing_subword_prefix or end_of_word_suffix (ByteLevelBPETokenizer), number tokens in a "
            "fixed order. Otherwise reprobox verify will show whether it matters.",
        ),
        Rule(
            "tokenizer-retraining",
            "{detail} trains a new vocabulary with the original tokenizer's model type: tokenizers numbers "
            "WordPiece (BERT-style) and Unigram (T5-, ALBERT-style) vocabularies in hash-map order, which "
            "changes from run to run, and byte-level BPE (GPT-2-style) ones in a fixed order.",
            "Check the model type (tokenizer.backend_tokenizer.model); for WordPiece or Unigram, train once, "
            "save_pretrained the result and load it in verified runs, or let reprobox verify show whether it "
            "matters.",
            INFO,
        ),
        Rule(
            "unsorted-listing",
            "{detail} returns entries in the order the file system keeps them, which differs between file "
            "systems, machines and copies of the data, so a file list or data set built from it can come "
            "out in another order.",
            "Sort the listing where it is made: sorted(os.listdir(d)), sorted(glob.glob(p)), "
            "sorted(path.rglob(p)); in os.walk, sort dirnames in place (dirnames.sort()) and iterate "
            "sorted(filenames). reprobox verify --vary file-order shows whether the order matters.",
        ),
        Rule(
            "completion-order",
            "{detail} yields results in the order the workers finish, which depends on timing, so a list "
            "built from them, or a floating-point sum over them, can differ between runs.",
            "Use pool.imap or pool.map (results in submission order), iterate the futures in the order they "
            "were submitted ([f.result() for f in futures]), or sort the results by their input before use.",
        ),
        Rule(
            "run-specific-name",
            "{detail}; it differs between runs or machines, so the job's outputs differ even when its "
            "training does not.",
            "Keep it out of file names and saved outputs (print it to the log instead), or take it from the "
            "job's configuration; reprobox verify names the timestamps, host names and process ids it "
            "recognises as run-specific, so such runs grade reproduced, not bit-identical.",
            INFO,
        ),
        Rule(
            "random-name",
            "{detail}; it is random on every run, so the job's outputs differ between runs even when its "
            "training does not.",
            "Name outputs after what the job fixes (the step, the seed, a hash of the content, or "
            "uuid.uuid5(namespace, name)), and write paths relative to the output folder instead of "
            "temporary ones; reprobox cannot make these names repeat.",
        ),
        Rule(
            "sklearn-random-state",
            "{detail} draws from NumPy's global random state (scikit-learn's check_random_state(None)), "
            "which is seeded from the operating system in every process unless the job seeds it, so the "
            "fitted model or the split differs between runs.",
            "Pass random_state=seed, an int from the job's configuration, to every estimator and splitter "
            "that takes one.",
        ),
        Rule(
            "lightgbm-nondeterministic",
            "{detail}: LightGBM then picks row-wise or column-wise histograms by timing both and sums in an "
            "order that depends on its threads, so the trees can differ from run to run.",
            "Pass deterministic=True with force_row_wise=True (or force_col_wise=True), as LightGBM's "
            "parameter docs ask for stable results on the CPU (deterministic does nothing on GPUs); results "
            "still differ between LightGBM versions, compilers and machines.",
        ),
        Rule(
            "compile-autotune",
            "torch.compile autotuning ({detail}) picks kernels by timing them on the device, so the "
            "chosen kernels, and their rounding, can change between runs and machines.",
            "Use the default mode in verified runs; under torch.use_deterministic_algorithms(True), "
            "which reprobox sets, Inductor's deterministic mode also skips this autotuning.",
        ),
        Rule(
            "compile",
            "torch.compile generates kernels whose rounding can differ from eager mode and between "
            "torch, Triton and GPU versions.",
            "Compare compiled runs only with compiled runs on the same pinned image and GPU model, and "
            "set torch._inductor.config.fallback_random = True if random ops must match eager mode.",
            INFO,
        ),
        Rule(
            "fused-attention",
            "{detail} fused CUDA attention kernels (FlashAttention, memory-efficient, cuDNN), whose "
            "results depend on the kernel chosen and which may use nondeterministic algorithms.",
            "Select the math backend in verified runs: with torch.nn.attention.sdpa_kernel("
            "SDPBackend.MATH): around the attention calls.",
        ),
        Rule(
            "cudnn-benchmark",
            "torch.backends.cudnn.benchmark enabled: cuDNN times several convolution algorithms and "
            "keeps the fastest, which can differ between runs and machines.",
            "Remove the assignment or set it to False: it runs after reprobox sets cudnn.benchmark = False "
            "(the job file's determinism.cudnn_benchmark), so it overrides that setting.",
        ),
        Rule(
            "cudnn-deterministic-off",
            "torch.backends.cudnn.deterministic turned off lets cuDNN pick nondeterministic convolution "
            "algorithms.",
            "Remove the assignment: it runs after reprobox sets cudnn.deterministic = True, so it turns "
            "that setting off again.",
        ),
        Rule(
            "deterministic-algorithms-off",
            "This call can turn off deterministic algorithms that reprobox turned on, so ops with "
            "nondeterministic kernels run without an error or a warning.",
            "Remove the call; to find the ops that lack deterministic kernels, run with warn_only=True "
            "and read the audit records instead.",
        ),
        Rule(
            "syntax-error",
            "Python cannot parse this file ({detail}), so it was not scanned for hazards.",
            "Fix the syntax error (python -m py_compile shows it) so the file can be scanned.",
        ),
        Rule(
            "unreadable-file",
            "This file could not be read ({detail}), so it was not scanned for hazards.",
            "Make the file readable by the user running reprobox, or exclude its folder.",
        ),
    )
}
