import { Options } from './options.tsx';

/** Which of the user's drives a folder is on, and a way to go to another. */
export function DriveSelect(props: {
  id?: string;
  drives: readonly string[];
  folder: string | null;
  onChange: (drive: string) => void;
}) {
  return (
    <select
      id={props.id}
      value={props.drives.find((d) => props.folder?.startsWith(d)) ?? ''}
      onChange={(e) => props.onChange(e.currentTarget.value)}
    >
      <Options values={props.drives} />
    </select>
  );
}
