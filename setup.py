from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).parent


def requirements(name):
    lines = (here / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith('#')]


setup(
    name='pyterrier-utility',
    version='0.1.0',
    description='PyTerrier plugin measuring whether retrieval relevance propagates to RAG answers '
                '(context utility, eRAG, LLM-retEval)',
    long_description=(here / 'README.md').read_text(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['pyterrier_utility', 'pyterrier_utility.*']),
    package_data={'pyterrier_utility': ['data/cranfield/*', 'experiment/assets/*']},
    python_requires='>=3.10',
    install_requires=['torch', 'pyterrier-rag>=0.3.0'] + requirements('requirements.txt'),
    extras_require={
        'offline': requirements('requirements-offline.txt'),
        'test': requirements('requirements-test.txt'),
    },
    entry_points={
        'console_scripts': ['pyterrier-utility=pyterrier_utility.cli:main'],
        'pyterrier.dataset_provider': ['utility = pyterrier_utility.datasets:UtilityDatasetProvider'],
    },
    classifiers=[
        'Programming Language :: Python :: 3',
        'Topic :: Scientific/Engineering :: Information Analysis',
    ],
)
