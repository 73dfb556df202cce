"""Unreadable share by the embedding model's tokenizer, per kind of text, and how often distinct titles of
each kind look alike (title cosine >= 0.70, the fresh rule's bar). Prints figures; not a test.

Usage: .venv/bin/python bench/unreadable_text.py [--model PATH]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.dedup.lexical import lexical_similarity
from embedding.models import SentenceTransformerEncoder, default_model_path
from embedding.readability import ReadabilityMeter

TEXTS = {
    "zh": [
        "编辑特别卡顿",
        "拒绝访问",
        "终端无法打开",
        "插件安装失败",
        "中文输入法候选框位置不对",
        "保存文件时自动格式化不起作用",
        "远程连接服务器超时",
        "调试时断点不生效",
        "搜索功能无法使用",
        "更新后字体显示模糊",
        "Git 提交记录不显示",
        "打开大文件时崩溃",
        "代码提示消失了",
        "无法切换主题颜色",
        "设置同步失败",
        "侧边栏图标不见了",
        "自动保存功能失效",
        "Python 解释器找不到",
        "窗口无法最大化",
        "复制粘贴乱码",
    ],
    "ru": [
        "Редактор сильно тормозит",
        "Отказано в доступе",
        "Не открывается терминал",
        "Не удаётся установить расширение",
        "Неправильное положение окна подсказок при вводе",
        "Автоформатирование при сохранении не работает",
        "Тайм-аут подключения к удалённому серверу",
        "Точки останова не срабатывают при отладке",
        "Поиск не работает",
        "После обновления шрифт стал размытым",
        "Не отображается история коммитов Git",
        "Падение при открытии большого файла",
        "Пропали подсказки кода",
        "Не могу сменить цветовую тему",
        "Ошибка синхронизации настроек",
        "Пропали значки на боковой панели",
        "Автосохранение перестало работать",
        "Не найден интерпретатор Python",
        "Окно не разворачивается на весь экран",
        "Кракозябры при копировании и вставке",
    ],
    "ja": [
        "エディターの動作が非常に重い",
        "アクセスが拒否されました",
        "ターミナルが開かない",
        "拡張機能のインストールに失敗する",
        "日本語入力の変換候補の位置がずれる",
        "保存時の自動フォーマットが動作しない",
        "リモートサーバーへの接続がタイムアウトする",
        "デバッグ時にブレークポイントが効かない",
        "検索機能が使えない",
        "更新後にフォントがぼやける",
        "Git のコミット履歴が表示されない",
        "大きなファイルを開くとクラッシュする",
        "コード補完が表示されなくなった",
        "カラーテーマを切り替えられない",
        "設定の同期に失敗する",
        "サイドバーのアイコンが消えた",
        "自動保存が機能しない",
        "Python インタープリターが見つからない",
        "ウィンドウを最大化できない",
        "コピー＆ペーストで文字化けする",
    ],
    "ko": [
        "편집기가 매우 느립니다",
        "접근이 거부되었습니다",
        "터미널이 열리지 않습니다",
        "확장 프로그램 설치 실패",
        "한글 입력 시 후보 창 위치가 잘못됨",
        "저장 시 자동 서식이 작동하지 않음",
        "원격 서버 연결 시간 초과",
        "디버깅 시 중단점이 작동하지 않음",
        "검색 기능을 사용할 수 없음",
        "업데이트 후 글꼴이 흐릿함",
        "Git 커밋 기록이 표시되지 않음",
        "큰 파일을 열면 충돌함",
        "코드 힌트가 사라짐",
        "색상 테마를 변경할 수 없음",
        "설정 동기화 실패",
        "사이드바 아이콘이 사라짐",
        "자동 저장이 작동하지 않음",
        "Python 인터프리터를 찾을 수 없음",
        "창을 최대화할 수 없음",
        "복사 붙여넣기 시 글자가 깨짐",
    ],
    "en": [
        "Editor is extremely sluggish",
        "Access denied",
        "Terminal does not open",
        "Extension installation fails",
        "IME candidate window is in the wrong position",
        "Format on save does not work",
        "Remote connection to the server times out",
        "Breakpoints are not hit while debugging",
        "Search does not work",
        "Font looks blurry after the update",
        "Git commit history is not shown",
        "Crash when opening a large file",
        "Code suggestions disappeared",
        "Cannot switch the color theme",
        "Settings sync fails",
        "Sidebar icons are gone",
        "Auto save stopped working",
        "Python interpreter not found",
        "Window cannot be maximized",
        "Garbled text when copying and pasting",
    ],
    "emoji": [
        "🐢🐢🐢 editor so slow 😭",
        "🚫🔒 access denied 😡",
        "terminal won't open 💀💀",
        "🧩 extension install ❌",
        "🔍 search broken 🤷",
        "🎨 theme switch 🙅",
        "💾 autosave 👎👎",
        "🐍 python not found 🔎",
        "💥💥 crash on big file 📁",
        "🌫️ blurry font after update 🆙",
        "🔥🔥🔥",
        "😭😭😭😭",
        "👍",
        "🚀🚀 deploy 🚀🚀",
        "❤️❤️ sync ❤️",
    ],
    "code": [
        "TypeError: Cannot read properties of undefined (reading 'length')",
        "ENOENT: no such file or directory, open '/home/user/.vscode/settings.json'",
        '`git push` fails with "remote: Permission to repo denied"',
        "Uncaught ReferenceError: require is not defined",
        "ModuleNotFoundError: No module named 'numpy'",
        "segmentation fault (core dumped) in rg",
        "npm ERR! code ERESOLVE",
        "fatal: not a git repository (or any of the parent directories): .git",
        "SyntaxError: Unexpected token '<' in JSON at position 0",
        "java.lang.OutOfMemoryError: Java heap space",
        "for (let i = 0; i < arr.length; i++) { sum += arr[i]; }",
        "def __init__(self, *, path: Path) -> None:",
        "SELECT id, name FROM users WHERE id = $1",
        "kubectl get pods -n kube-system",
        "std::vector<int> v{1,2,3}; v.push_back(4);",
    ],
}
WORDS = ["Git", "Python", "Terminal", "Debug", "Search"] * 4
TEXTS["mixed"] = [f"{word} {text}" for word, text in zip(WORDS, TEXTS["zh"], strict=True)] + [f"{word} {text}" for word, text in zip(WORDS, TEXTS["ru"], strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="A sentence-transformers model folder (default: the bundled all-MiniLM-L6-v2).")
    args = parser.parse_args()
    meter = ReadabilityMeter.from_model_folder(args.model or default_model_path(), max_seq_length=254)
    encoder = SentenceTransformerEncoder(args.model)
    pairs: list[tuple[str, float, float, float]] = []
    for kind, texts in TEXTS.items():
        vectors, shares = encoder.encode(texts), meter.shares(texts)
        for i, j in itertools.combinations(range(len(texts)), 2):
            lexical = float(lexical_similarity(texts[i], [texts[j]])[0])
            pairs.append((kind, float(vectors[i] @ vectors[j]), max(shares[i], shares[j]), lexical))
        alike = [cosine for name, cosine, _, _ in pairs if name == kind]
        print(
            f"{kind:6} share mean {np.mean(shares):.2f} min {min(shares):.2f} max {max(shares):.2f}",
            f"| distinct pairs at title cosine >= 0.70: {np.mean(np.array(alike) >= 0.70):.2f}",
        )
    bad = [pair for pair in pairs if pair[1] >= 0.70]
    for limit in (0.2, 0.3, 0.4, 0.5):
        caught = sum(pair[2] > limit for pair in bad)
        print(f"share > {limit}: {caught}/{len(bad)} distinct pairs at title cosine >= 0.70 have an unreadable side")
    print("largest character similarity of a distinct pair:", {kind: round(max(p[3] for p in pairs if p[0] == kind), 2) for kind in TEXTS})
    sample = [text for texts in TEXTS.values() for text in texts] * 10
    started = time.perf_counter()
    meter.shares(sample[:1000])
    print(f"measuring 1,000 titles: {1000 * (time.perf_counter() - started):.0f} ms")


if __name__ == "__main__":
    main()
